


def forward(self, x, y = 1):
    pass
    