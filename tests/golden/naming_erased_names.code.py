


def forward(self, x):
    add_1 = x + 2;  x = None
    add_2 = add_1 + 3;  add_1 = None
    return add_2
    