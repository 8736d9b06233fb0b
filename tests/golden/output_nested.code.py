


def forward(self, x, y):
    return (x, [y, 'str', None], {'k': (x, 'v'), 'n': None, 3: y}, "str'q", 'a"b', 1.5, ())
    