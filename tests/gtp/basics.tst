# Protocol basics: ids, framing, administrative commands, errors.
# gogui-regress style: a numbered command, then `#? [regex]` for the
# response text (full match); `#? [?regex]` expects a failure response.

1 protocol_version
#? [2]

2 name
#? [alphalite]

3 version
#? [[0-9]+\.[0-9]+\.[0-9]+]

4 known_command lz-analyze
#? [true]

5 known_command no_such_command
#? [false]

6 known_command KNOWN_COMMAND
#? [false]

7 list_commands
#? [(?s).*\nboardsize\n.*\ngenmove\n.*kgs-genmove_cleanup\n.*lz-genmove_analyze\n.*\nundo.*]

8 no_such_command
#? [?unknown command]

9 NAME
#? [?unknown command]

# A comment after a command; tabs are spaces.
10	known_command	play   # is play known?
#? [true]

11 boardsize
#? [?syntax error]

12 boardsize x
#? [?syntax error]

13 komi abc
#? [?syntax error]

14 komi nan
#? [?syntax error]

15 komi 6.5
#? []

16 name extra arguments
#? [?syntax error]

17 gogui-analyze_commands
#? [(?s)gfx/Policy heatmap/alphalite-policy_heatmap\n.*]
