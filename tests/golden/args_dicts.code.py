


def forward(self, x, y):
    dicts = x.dicts({}, {'a': 1, 'b': x}, {1: 'one', 2: x}, {'k': [x, {'j': (y,)}]}, {'a': 1, 2: 'b'}, d = {'key': y, 's': 'v'});  x = y = None
    return dicts
    