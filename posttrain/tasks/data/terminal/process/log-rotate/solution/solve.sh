#!/bin/bash
cat > rotate.sh <<'SH'
#!/bin/bash
[ -f app.log ] && [ "$(stat -c %s app.log)" -gt 1024 ] || exit 0
rm -f app.log.3
[ -f app.log.2 ] && mv app.log.2 app.log.3
[ -f app.log.1 ] && mv app.log.1 app.log.2
mv app.log app.log.1
: > app.log
SH
chmod +x rotate.sh
