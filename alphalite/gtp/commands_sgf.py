"""SGF commands: ``loadsgf`` into the game record, ``printsgf`` from it.
``loadsgf`` takes the record's komi (``KM``); without one the current komi
stands (KataGo keeps its current rules' komi; GNU Go sets its own 5.5)."""

from __future__ import annotations

import dataclasses
import os

from alphalite.gtp.protocol import GtpFailure, parse_int
from alphalite.gtp.session import NAME


class SgfCommands:
    """Mixin over a ``Session``."""

    def cmd_loadsgf(self, filename, move_number=None):
        from alphalite.go import sgf

        limit = None if move_number is None else parse_int(move_number, lo=1) - 1
        try:
            if not os.path.isfile(filename):  # not a FIFO or device that could block or never end
                raise OSError("not a regular file")
            with open(filename, "rb") as f:
                data = f.read(16 << 20)
            rec = sgf.read_sgf(data)
            if not rec.komi_stated:  # komi is the controller's: a record without KM keeps it, as KataGo's does
                rec = dataclasses.replace(rec, komi=self.game.komi)
            self.game.load(rec, limit)
        except (OSError, ValueError) as e:  # the game before it stands
            self.log(f"{NAME}: cannot load {filename!r}: {e}")
            raise GtpFailure("cannot load file") from None
        return ""

    def cmd_printsgf(self, filename=None):
        from alphalite.go import sgf

        result = ""
        if self.state.is_over:
            result = sgf.result_string(self.judge(self.state)[0])
        data = sgf.write_sgf(self.game.record(result))
        if filename is None:
            return data.decode("utf-8", "replace").strip()
        try:
            tmp = f"{filename}.tmp{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, filename)
        except OSError as e:
            self.log(f"{NAME}: cannot write {filename!r}: {e}")
            raise GtpFailure("cannot save file") from None
        return ""

