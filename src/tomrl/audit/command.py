"""Audit data for leakage and shortcuts: tomrl data audit --train FILE --test FILE.

(Not built yet: issue #4.)
"""

from tomrl.pending import placeholder

register, run = placeholder(4, "tomrl data audit")
