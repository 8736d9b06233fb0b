


def forward(self, x, y, z):
    mul = x * 2;  x = None
    return (mul, z)
    