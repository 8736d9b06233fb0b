


def forward(self):
    return None
    