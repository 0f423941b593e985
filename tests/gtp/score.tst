# Scoring: Tromp-Taylor area with dead stones estimated by random playouts.

1 boardsize 7
#? []

2 clear_board
#? []

3 komi 0.5
#? []

4 final_score
#? [W\+0\.5]

# Black owns columns A-D, white E-G; a lone white stone at B4 is dead.
10 play b d1
#? []
11 play b d2
#? []
12 play b d3
#? []
13 play b d4
#? []
14 play b d5
#? []
15 play b d6
#? []
16 play b d7
#? []
17 play w e1
#? []
18 play w e2
#? []
19 play w e3
#? []
20 play w e4
#? []
21 play w e5
#? []
22 play w e6
#? []
23 play w e7
#? []
24 play w b4
#? []

30 final_status_list dead
#? [B4]

31 final_status_list alive
#? [[DE][1-7]( [DE][1-7]){6}\n[DE][1-7]( [DE][1-7]){6}]

32 final_status_list seki
#? []

33 final_status_list bogus
#? [?syntax error]

34 final_score
#? [B\+6\.5]

35 play b pass
#? []

36 play w pass
#? []

37 final_score
#? [B\+6\.5]

38 printsgf
#? [(?s).*RE\[B\+6\.5\].*]

# Black cleans up the dead stone instead of passing.
39 kgs-genmove_cleanup b
#? [A4|B5|B3|C4]
