"""Train with GRPO or REINFORCE++: tomrl train --config FILE [key=value ...].

(Not built yet: issue #7.)
"""

from tomrl.pending import placeholder

register, run = placeholder(7, "tomrl train")
