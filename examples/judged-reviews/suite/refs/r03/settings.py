def parse_line(line):
    """Parse 'key = value' into (key, value); lines starting with # are comments."""
    if line.startswith("#"):
        return None
    key, value = line.split("=")
    return key.strip(), value.strip()


def load(path):
    """Read a settings file into a dict."""
    settings = {}
    for line in open(path):
        parsed = parse_line(line)
        if parsed:
            settings[parsed[0]] = parsed[1]
    return settings
