"""Export data and reward adapter for veRL: tomrl export verl --config FILE --out DIR.

(Not built yet: issue #7.)
"""

from tomrl.pending import placeholder

register, run = placeholder(7, "tomrl export verl")
