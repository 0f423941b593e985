"""SGF reading, replay through our board, and writing back (alphalite.go.sgf)."""

import tarfile
from pathlib import Path

import pytest

from alphalite.go import board, coords, sgf

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "tygem-sample.tar.gz"


def rec(text: str | bytes) -> sgf.GameRecord:
    return sgf.read_sgf(text.encode() if isinstance(text, str) else text)


def gtp(v, size=19):
    return coords.from_gtp(v, size)


def sample_records(n):
    out = []
    with tarfile.open(SAMPLE) as tf:
        for m in tf:
            if m.isfile():
                out.append(tf.extractfile(m).read())
            if len(out) == n:
                break
    return out


def test_tygem_record_fields():
    data = sample_records(2)[1]
    r = sgf.read_sgf(data)
    assert (r.size, r.komi, r.rules, r.handicap) == (19, 6.5, "Korean", 0)
    assert (r.black_player, r.white_player, r.black_rank, r.white_rank) == ("qqq", "psg007", "9d", "9d")
    assert (r.result, r.winner, r.margin, r.result_kind) == ("B+R", 1, None, "resign")
    assert r.moves[:2] == ((1, gtp("R16")), (-1, gtp("D17")))  # B[qd] W[dc]
    assert [c for c, _ in r.moves] == [1 if i % 2 == 0 else -1 for i in range(len(r.moves))]
    assert sgf.replay(r) == (len(r.moves), "")


def test_passes_empty_and_tt():
    r = sgf.read_sgf((DATA / "pass-tt.sgf").read_bytes())
    assert [m for _, m in r.moves] == [gtp("Q16"), 361, gtp("D16"), 361, 361]
    assert r.result_kind == "time" and r.winner == board.BLACK
    # tt is a real point above 19x19 (sgfmill's rule)
    r21 = rec("(;SZ[21];B[tt];W[])")
    assert r21.moves == ((1, coords.to_flat(19, 19, 21)), (-1, 21 * 21))


def test_setup_ab_aw_ae_and_variations():
    r = sgf.read_sgf((DATA / "variations.sgf").read_bytes())
    assert r.size == 13
    assert r.setup_black == tuple(sorted((gtp("D10", 13), gtp("K4", 13))))
    assert r.setup_white == (gtp("D4", 13),)
    # main line only: W[jd] B[gg] W[gc]; the (;B[cc];W[kk]) variation is ignored
    assert [m for _, m in r.moves] == [gtp("K10", 13), gtp("G7", 13), gtp("G11", 13)]
    assert (r.winner, r.result_kind) == (0, "void")
    r2 = rec("(;SZ[9]AB[aa][bb]AW[cc]AE[bb];B[ee])")
    assert r2.setup_black == (0,) and r2.setup_white == (20,)


def test_handicap_with_and_without_ab():
    r = sgf.read_sgf((DATA / "handicap-9x9.sgf").read_bytes())
    assert r.handicap == 4
    assert set(r.setup_black) == {gtp(v, 9) for v in ("C3", "G7", "C7", "G3")}
    assert r.moves[0][0] == board.WHITE
    assert sgf.replay(r) == (4, "")
    nine = rec("(;SZ[19]HA[9];W[qq])")
    expect = {gtp(v) for v in ("D4", "Q16", "D16", "Q4", "D10", "Q10", "K4", "K16", "K10")}
    assert set(nine.setup_black) == expect
    assert set(rec("(;SZ[19]HA[3])").setup_black) == {gtp(v) for v in ("D4", "Q16", "D16")}
    assert set(rec("(;SZ[13]HA[5])").setup_black) == {gtp(v, 13) for v in ("D4", "K10", "D10", "K4", "G7")}
    # AB given: those are the handicap stones, whatever HA says
    own = rec("(;SZ[19]HA[2]AB[aa][ss])")
    assert own.setup_black == (gtp("A19"), gtp("T1")) and own.handicap == 2
    assert rec("(;SZ[19]HA[1])").setup_black == ()
    with pytest.raises(sgf.SgfError, match="handicap 5"):
        rec("(;SZ[10]HA[5])")
    # HA without AB whose record plays the handicap stones as its first black moves: no extra stones
    moved = rec("(;SZ[19]HA[2]KM[0.5];B[pp];B[dd];W[dq];B[qd])")
    assert moved.setup_black == () and [c for c, _ in moved.moves] == [board.BLACK] * 2 + [board.WHITE, board.BLACK]
    assert sgf.replay(moved) == (4, "")
    # AB in a node before the first move: the handicap stones all the same
    later = rec("(;SZ[19]HA[2]KM[0.5];AB[pd][dp];W[dd];B[pp])")
    assert set(later.setup_black) == {gtp("D4"), gtp("Q16")} and len(later.moves) == 2 and later.stop == ""
    assert rec("(;SZ[19];B[pd];AB[dd];W[dp])").stop == "setup"  # after a move: the usable game ends there


@pytest.mark.parametrize("km, komi", [("6.5", 6.5), ("7.5", 7.5), ("0", 0.0), ("-5.5", -5.5), ("375", 7.5),
                                      ("650", 6.5), ("275", 5.5), ("550", 5.5), ("", 0.0), ("abc", 0.0)])
def test_komi_rule(km, komi):
    assert sgf.parse_komi(km) == komi
    assert rec(f"(;SZ[19]KM[{km}];B[pd])").komi == komi


def test_odd_komi_file():
    assert sgf.read_sgf((DATA / "odd-komi.sgf").read_bytes()).komi == 7.5


@pytest.mark.parametrize("re_, winner, margin, kind", [
    ("B+R", 1, None, "resign"), ("W+Resign", -1, None, "resign"), ("W+3.5", -1, 3.5, "score"),
    ("B+T", 1, None, "time"), ("W+Time", -1, None, "time"), ("B+F", 1, None, "forfeit"),
    ("B+", 1, None, "win"), ("Void", 0, None, "void"), ("?", 0, None, "unknown"), ("0", 0, 0.0, "draw"),
    ("Draw", 0, 0.0, "draw"), ("b+0.5", 1, 0.5, "score"), ("", 0, None, "unknown"),
])
def test_results(re_, winner, margin, kind):
    assert sgf.parse_result(re_) == (winner, margin, kind)


def test_encodings():
    gb = sgf.read_sgf((DATA / "gb18030-no-ca.sgf").read_bytes())
    assert gb.black_player == "\u674e\u4e16\u77f3" and gb.encoding == "gb18030"
    latin = sgf.read_sgf((DATA / "latin1-no-ca.sgf").read_bytes())
    assert (latin.black_player, latin.white_player) == ("Jos\u00e9", "M\u00fcller")
    wrong = sgf.read_sgf((DATA / "wrong-ca.sgf").read_bytes())  # UTF-8 bytes declared ISO-8859-1
    assert wrong.black_player == "\u674e\u4e16\u77f3"
    utf8_no_ca = rec("(;SZ[19]PB[\u674e\u4e16\u77f3];B[pd])")
    assert utf8_no_ca.black_player == "\u674e\u4e16\u77f3"
    declared = rec(b"(;CA[GB2312]SZ[19]PW[" + "\u53e4\u529b".encode("gb2312") + b"];B[pd])")
    assert declared.white_player == "\u53e4\u529b"
    bogus_ca = rec("(;CA[no-such-codec]SZ[19]PB[x];B[pd])")
    assert bogus_ca.black_player == "x"


@pytest.mark.parametrize("name, msg", [("corrupt.sgf", "not a valid SGF"), ("truncated.sgf", "not a valid SGF"),
                                       ("binary.sgf", "binary")])
def test_bad_files_raise_one_line(name, msg):
    with pytest.raises(sgf.SgfError, match=msg) as e:
        sgf.read_sgf((DATA / name).read_bytes())
    assert "\n" not in str(e.value)


def test_board_size_with_both_sides_and_collections():
    assert rec("(;GM[1]SZ[19:19];B[pd];W[dp])").size == 19
    with pytest.raises(sgf.SgfError, match="square boards only"):
        rec("(;GM[1]SZ[19:13];B[pd])")
    data = b"(;SZ[19]RE[B+R];B[pd];W[dp])(;SZ[9]RE[W+R];B[ee];W[cc];B[gg])(;SZ[x])"
    first, second, third = sgf.read_sgf_collection(data)
    assert sgf.read_sgf(data) == first and first.winner == board.BLACK and len(first.moves) == 2
    assert second.size == 9 and second.winner == board.WHITE and len(second.moves) == 3
    assert isinstance(third, sgf.SgfError) and "bad board size" in str(third)


@pytest.mark.parametrize("text, msg", [("(;SZ[1];B[aa])", "unsupported board size 1"),
                                       ("(;SZ[26];B[aa])", "unsupported board size 26"),
                                       ("(;SZ[x])", "bad board size"), ("(;SZ[9];B[zz])", "bad move"),
                                       ("", "not a valid"), ("(;SZ[9]AB[zz])", "bad setup")])
def test_errors(text, msg):
    with pytest.raises(sgf.SgfError, match=msg):
        rec(text)
    with pytest.raises(sgf.SgfError):
        sgf.read_sgf("a str, not bytes")


def test_replay_counts_illegal_by_reason():
    r = sgf.read_sgf((DATA / "illegal-move.sgf").read_bytes())
    assert sgf.replay(r) == (3, "occupied")
    # suicide: black fills the last liberty of its own stone in the corner
    assert sgf.replay(rec("(;SZ[9]AW[ba][ab];B[aa])")) == (0, "suicide")
    # allowed suicide of one stone recreates the position: positional superko forbids it
    assert sgf.replay(rec("(;SZ[9]AW[ba][ab];B[aa])"), suicide=True) == (0, "superko")
    assert sgf.replay(rec("(;SZ[9]AW[ba][ab];B[aa])"), suicide=True, superko=False) == (1, "")
    # ko: W B2, B C2 takes it (one stone, one liberty), W B2 retakes at once
    shape = "(;SZ[5]AB[ba][ab][bc]AW[ca][db][cc];W[bb];B[cb];W[bb])"
    assert sgf.replay(rec(shape)) == (2, "ko")
    assert sgf.replay(rec("(;SZ[9]AB[aa]AW[ba][ab])")) == (0, "bad setup")
    assert sgf.replay(rec("(;SZ[9];B[];W[];B[ee])")) == (2, "game over")


def test_write_round_trip():
    records = [sgf.read_sgf(d) for d in sample_records(5)]
    records += [sgf.read_sgf((DATA / n).read_bytes()) for n in
                ("pass-tt.sgf", "handicap-9x9.sgf", "variations.sgf", "gb18030-no-ca.sgf", "odd-komi.sgf")]
    records.append(rec("(;SZ[25]PL[W]AB[yy]RE[W+0.5];W[tt];B[])"))
    for r in records:
        out = sgf.write_sgf(r)
        assert isinstance(out, bytes) and out.startswith(b"(;")
        assert sgf.read_sgf(out) == r
    # other moves
    r = records[0]
    short = sgf.read_sgf(sgf.write_sgf(r, r.moves[:10]))
    assert short.moves == r.moves[:10] and short.result == r.result
