"""Tournaments between GTP engines (``alphalite arena``) and the ratings
they yield. Depends on ``gtp``'s layers below it (engines are driven as
processes through ``go.gtpclient``)."""
