"""Live updates out of a commit: badge events over Redis pub/sub, and who has a socket open (presence).

Producers register events as effects of their transaction (app/unitofwork.py); the websocket side
(app/realtime) listens and recounts. Nothing here renders or counts: a message is only a hint.
"""
