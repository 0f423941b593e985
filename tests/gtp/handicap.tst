# Handicap placement.

1 boardsize 19
#? []

2 clear_board
#? []

3 fixed_handicap 4
#? [D4 Q16 D16 Q4]

4 fixed_handicap 2
#? [?board not empty]

5 clear_board
#? []

6 fixed_handicap 1
#? [?invalid number of stones]

7 fixed_handicap 10
#? [?invalid number of stones]

8 fixed_handicap 9
#? [D4 Q16 D16 Q4 D10 Q10 K4 K16 K10]

9 genmove w
#? [[A-HJ-T][0-9]+|pass]

10 boardsize 9
#? []

11 fixed_handicap 4
#? [C3 G7 C7 G3]

12 clear_board
#? []

13 boardsize 8
#? []

14 fixed_handicap 5
#? [?invalid number of stones]

15 place_free_handicap 12
#? [([A-HJ][1-8] ){11}[A-HJ][1-8]]

16 place_free_handicap 3
#? [?board not empty]

17 clear_board
#? []

18 place_free_handicap 64
#? [?invalid number of stones]

19 place_free_handicap 1
#? [?invalid number of stones]

20 set_free_handicap a1 b2 c3
#? []

21 showboard
#? [(?s).* 3 \. \. X .* 2 \. X \. .* 1 X \. \. .*White to play.*]

22 clear_board
#? []

23 set_free_handicap a1
#? [?invalid number of stones]

24 set_free_handicap a1 a1
#? [?bad vertex list]

25 set_free_handicap a1 zz
#? [?syntax error]

# A well-formed vertex off the board makes a bad vertex list (spec), not an illegal move.
26 set_free_handicap a1 z1
#? [?bad vertex list]

27 set_free_handicap a1 a10
#? [?bad vertex list]

# With only Black stones on the board nothing is territory yet: Black asked
# to move (a GUI asking the same colour twice) must not pass.
28 boardsize 9
#? []

29 fixed_handicap 4
#? [C3 G7 C7 G3]

30 genmove b
#? [[A-HJ][1-9]]

31 clear_board
#? []

32 play b e5
#? []

33 genmove b
#? [[A-HJ][1-9]]
