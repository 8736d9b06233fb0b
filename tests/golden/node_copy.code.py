


def forward(self, x):
    relu = torch.relu(x);  x = None
    relu_1 = torch.relu(relu);  relu = None
    sum_1 = relu_1.sum(dim = 0);  relu_1 = None
    return sum_1
    