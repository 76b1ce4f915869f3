#!/bin/bash
cat > service.sh <<'SH'
#!/bin/bash
alive() { [ -f server.pid ] && kill -0 "$(cat server.pid)" 2>/dev/null; }
case "$1" in
  start)
    alive && exit 0
    nohup ./server.sh > server.out 2>&1 &
    echo $! > server.pid
    ;;
  status)
    if alive; then echo running; else echo stopped; exit 3; fi
    ;;
  stop)
    if alive; then
      pid=$(cat server.pid)
      kill -TERM "$pid"
      while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    fi
    rm -f server.pid
    ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
SH
chmod +x service.sh
