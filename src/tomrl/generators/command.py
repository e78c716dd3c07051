"""Generate Hi-ToM- or ToMi-style data: tomrl data generate hitom --n N --seed S --out FILE.

(Not built yet: issue #3.)
"""

from tomrl.pending import placeholder

register, run = placeholder(3, "tomrl data generate")
