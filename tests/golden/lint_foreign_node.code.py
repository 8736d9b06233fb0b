


def forward(self, x):
    relu = torch.relu(p);  p = None
    add = relu + x;  relu = x = None
    return add
    