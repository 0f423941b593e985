"""Scoring commands: ``final_score`` and ``final_status_list``, by the
session's judge (``decisions.Judge``: dead stones by the search's own
rollouts or by pattern rollouts, then Tromp-Taylor area with komi). As
GNU Go's, the chains in seki (``players.seki_points``) are listed as
``seki``, neither ``alive`` nor ``dead``."""

from __future__ import annotations

from alphalite.gtp.protocol import GtpFailure


class ScoreCommands:
    """Mixin over a ``Session``."""

    def cmd_final_score(self):
        from alphalite.go import sgf

        score, _ = self.judge(self.state)
        return sgf.result_string(score)

    def cmd_final_status_list(self, status):
        from alphalite.go import board

        status = status.lower()
        if status not in ("alive", "dead", "seki"):
            raise GtpFailure("syntax error")
        from alphalite.engine import players

        s = board.stones(self.state).ravel()
        seki = set(int(p) for p in players.seki_points(self.state))  # as GNU Go: neither alive nor dead
        if status == "seki":
            pts = sorted(seki)
        else:
            _, dead = self.judge(self.state)
            dead_set = set(int(p) for p in dead)
            pts = [p for p in range(s.size)
                   if s[p] != 0 and p not in seki and ((p in dead_set) == (status == "dead"))]
        return "\n".join(" ".join(self._to_gtp(p) for p in group) for group in groups(pts, s, self.size))


def groups(points, stones, size):
    """Connected same-colour groups among ``points`` (flat), each sorted."""
    left = set(points)
    out = []
    while left:
        p = min(left)
        left.remove(p)
        group, todo = [p], [p]
        while todo:
            q = todo.pop()
            r, c = divmod(q, size)
            for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                m = rr * size + cc
                if 0 <= rr < size and 0 <= cc < size and m in left and stones[m] == stones[p]:
                    left.remove(m)
                    group.append(m)
                    todo.append(m)
        out.append(sorted(group))
    return out
