


def forward(self):
    pass
    