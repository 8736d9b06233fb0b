


def forward(self, x, y):
    cat = torch.cat([x, y])
    lists = cat.lists([], [1], [x, [y, 2]], [[], [()]], ['s', None], l = [cat]);  cat = x = y = None
    return lists
    