"""Security tests: each module is one attack from issue 14, written as the attacker would run it."""
