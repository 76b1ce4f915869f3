#!/bin/bash
{
  echo "name,total"
  awk -F, 'NR == FNR { if (FNR > 1) name[$1] = $2; next }
           FNR > 1 { total[$2] += $3 }
           END { for (c in total) printf "%s,%.2f\n", name[c], total[c] }' customers.csv orders.csv \
    | sort -t, -k2,2nr
} > report.csv
