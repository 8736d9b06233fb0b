


def forward(self, x):
    linear = self.linear(x);  x = None
    return linear
    