


def forward(self, x, y):
    relu = torch.relu(y)
    add = relu + relu
    mul = torch.mul(x, y, out = add, new = [y, relu]);  x = y = add = relu = None
    return mul
    