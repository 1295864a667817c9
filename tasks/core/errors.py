"""The one exception a user is meant to read: a configuration or input problem, its message naming the file, row or
field and the fix. A module of its own so that every layer can raise it (config, the environment, the store) without
importing the settings."""


class ConfigError(ValueError):
    """A configuration or input problem the user must fix; the message names the file/field and the fix."""
