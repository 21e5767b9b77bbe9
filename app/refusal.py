"""A change refused by a rule: the message is a sentence for the person who asked, and nothing was changed.

Domain services raise Refused (or a subclass) before their first write, so a refused change leaves the
transaction unused; the console shows the message next to the form, the API as a problem document.
"""

from __future__ import annotations


class Refused(ValueError):
    """The change was refused; the message says why, and nothing was changed."""
