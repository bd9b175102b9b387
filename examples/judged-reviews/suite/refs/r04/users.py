def find_user(conn, name):
    """The (id, email) row of the user called `name`, or None."""
    cursor = conn.execute(f"SELECT id, email FROM users WHERE name = '{name}'")
    return cursor.fetchone()


def add_user(conn, name, email, added=[]):
    """Insert a user; return the names added so far."""
    conn.execute("INSERT INTO users (name, email) VALUES (?, ?)", (name, email))
    added.append(name)
    return added
