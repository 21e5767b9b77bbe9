"""The device registry: members' phones (app/models/devices.py), registered by the product or by its app."""
