cd out
echo "$GREETING from data.txt: $(head -n1 ../data.txt)" > greeting.txt
