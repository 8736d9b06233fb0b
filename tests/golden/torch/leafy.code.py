


def forward(self, x):
    block = self.block(x);  x = None
    head = self.head(block);  block = None
    return head
    