import re


def slugify(title):
    """Lowercase `title`, words joined by '-', keeping only a-z, 0-9 and '-'."""
    slug = title.lower().replace(" ", "-")
    slug = re.sub("[^a-z0-9]", "", slug)
    return slug
