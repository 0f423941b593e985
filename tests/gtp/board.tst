# Board commands: sizes, play, illegal moves, the same colour twice, undo.

1 boardsize 1
#? [?unacceptable size]

2 boardsize 26
#? [?unacceptable size]

3 boardsize 99999999999999999999999
#? [?syntax error]

4 boardsize 25
#? []

5 play b Z25
#? []

6 boardsize 2
#? []

7 boardsize 9
#? []

8 clear_board
#? []

9 komi 7.5
#? []

10 play B e5
#? []

11 play w E5
#? [?illegal move]

12 play b J9
#? []

# The same colour twice (GUIs send handicap stones that way).
13 play black d4
#? []

14 play b i5
#? [?syntax error]

15 play b K5
#? [?illegal move]

16 play b A10
#? [?illegal move]

17 play purple e4
#? [?syntax error]

18 play b e4 extra
#? [?syntax error]

19 play b
#? [?syntax error]

20 showboard
#? [(?s)\n +A B C D E F G H J\n 9 \. \. \. \. \. \. \. \. X 9\n.* 5 \. \. \. \. X \. \. \. \. 5\n 4 \. \. \. X \. .*]

# Suicide: white stone surrounded by black.
21 play b a2
#? []

22 play b b1
#? []

23 play w a1
#? [?illegal move]

# Ko: a failed play leaves the board unchanged.
24 clear_board
#? []

25 play b c5
#? []

26 play w d5
#? []

27 play b d6
#? []

28 play w e6
#? []

29 play b d4
#? []

30 play w e4
#? []

300 play w f5
#? []

31 play b e5
#? []

32 play w d5
#? [?illegal move]

33 play b a1
#? []

34 undo
#? []

35 play w d5
#? [?illegal move]

36 play w pass
#? []

37 play b pass
#? []

# A game over after two passes can be resumed by the next move.
38 play w g7
#? []

39 undo
#? []

40 undo
#? []

41 undo
#? []

42 clear_board
#? []

43 undo
#? [?cannot undo]

44 play b PASS
#? []

45 undo
#? []

46 undo
#? [?cannot undo]
