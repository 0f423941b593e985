# loadsgf / printsgf round trip ($DATA: tests/data, $TMP: the test's tmp_path).

1 loadsgf $DATA/no-such-file.sgf
#? [?cannot load file]

2 loadsgf $DATA/corrupt.sgf
#? [?cannot load file]

3 loadsgf $DATA/binary.sgf
#? [?cannot load file]

4 loadsgf $DATA/handicap-9x9.sgf
#? []

5 showboard
#? [(?s).* 7 \. \. X \. O \. X \. \. 7\n.* 5 \. \. \. \. O \. X \. \. 5\n.* 3 \. \. X \. X \. X \. \. 3\n.*White to play.*komi 0.5]

6 printsgf $TMP/round.sgf
#? []

7 boardsize 13
#? []

8 loadsgf $TMP/round.sgf
#? []

9 showboard
#? [(?s).* 7 \. \. X \. O \. X \. \. 7\n.* 5 \. \. \. \. O \. X \. \. 5\n.* 3 \. \. X \. X \. X \. \. 3\n.*White to play.*komi 0.5]

10 printsgf
#? [(?s)\(;.*AB\[cc\]\[cg\]\[gc\]\[gg\].*HA\[4\]KM\[0\.5\]PL\[W\]SZ\[9\];W\[ee\];B\[ge\];W\[ec\]\s*;B\[eg\]\)]

11 undo
#? []

12 undo
#? []

13 showboard
#? [(?s).* 7 \. \. X \. \. \. X \. \. 7\n.* 5 \. \. \. \. O \. X \. \. 5\n.* 3 \. \. X \. \. \. X \. \. 3\n.*White to play.*]

14 loadsgf $DATA/handicap-9x9.sgf 3
#? []

15 showboard
#? [(?s).* 7 \. \. X \. \. \. X \. \. 7\n.* 5 \. \. \. \. O \. X \. \. 5\n.*White to play.*]

16 printsgf $TMP/no-such-dir/x.sgf
#? [?cannot save file]
