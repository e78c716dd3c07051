"""Evaluate a model: tomrl eval --model M --benchmark B[,B...] [--limit N] [--out DIR].

(Not built yet: issue #6.)
"""

from tomrl.pending import placeholder

register, run = placeholder(6, "tomrl eval")
