"""The documents both editors' next-edits tests edit (test_neovim_next_edits.py,
test_vscode_next_edits.py): the same renames and inserts, one server, two clients."""

# A rename at the definition (get_user -> fetch_user) is proposed at the calls. (At one
# call it proposes nothing: a call of a function defined in the document renamed alone
# switched to another function, issue 55 item 2.)
SOURCE = """def get_user(uid):
    return {"id": uid}


def show(uid):
    print(get_user(uid))


def save(uid):
    store(get_user(uid))


def load(uid):
    return get_user(uid)
"""

# An argument added at one call (db.get(uid) -> db.get(uid, None)) is proposed at the other.
INSERT_SOURCE = """def load(db, uid):
    return db.get(uid)


def show(db, uid):
    print(db.get(uid))
"""
