


def forward(self, x):
    relu = torch.relu(x)
    return [{'relu': relu, 'x': x}, relu]
    