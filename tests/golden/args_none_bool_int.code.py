


def forward(self, x):
    scalars = x.scalars(None, True, False, 0, 1, -1, 4611686018427387904, -9223372036854775808, 9223372036854775807, a = None, b = True, c = -7);  x = None
    return scalars
    