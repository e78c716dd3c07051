"""Re-derive official Hi-ToM / ToMi labels with the oracle: tomrl data verify hitom.

(Not built yet: issue #3.)
"""

from tomrl.pending import placeholder

register, run = placeholder(3, "tomrl data verify")
