"""Load an official benchmark into unified JSONL: tomrl data load NAME --out FILE.

(Not built yet: issue #4.)
"""

from tomrl.pending import placeholder

register, run = placeholder(4, "tomrl data load")
