


def forward(self, x):
    add = x + 1;  x = None
    sigmoid = torch.sigmoid(add);  add = None
    return sigmoid
    