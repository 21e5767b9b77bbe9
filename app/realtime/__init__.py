"""The /ws websocket: one Redis listener per web process, per-user recounts, badge frames to local sockets."""
