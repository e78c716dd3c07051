"""Score completions: tomrl reward score --reward strict --input FILE --out FILE.

(Not built yet: issue #5.)
"""

from tomrl.pending import placeholder

register, run = placeholder(5, "tomrl reward score")
