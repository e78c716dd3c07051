"""Build a report from runs: tomrl report RUN_DIR... [--out DIR].

(Not built yet: issue #8.)
"""

from tomrl.pending import placeholder

register, run = placeholder(8, "tomrl report")
