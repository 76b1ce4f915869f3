paste -sd+ nums.txt | bc > sum.txt
