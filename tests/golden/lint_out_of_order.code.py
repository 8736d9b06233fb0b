


def forward(self, x):
    neg = torch.neg(relu);  relu = None
    relu = torch.relu(x);  x = None
    return neg
    