


def forward(self, x):
    features_0 = getattr(self.features, "0")(x);  x = None
    features_1 = getattr(self.features, "1")(features_0);  features_0 = None
    features_2 = getattr(self.features, "2")(features_1);  features_1 = None
    features_3 = getattr(self.features, "3")(features_2);  features_2 = None
    conv2 = self.conv2(features_3);  features_3 = None
    bn2 = self.bn2(conv2);  conv2 = None
    relu = torch.nn.functional.relu(bn2, inplace = False);  bn2 = None
    adaptive_avg_pool2d = torch.nn.functional.adaptive_avg_pool2d(relu, (1, 1));  relu = None
    flatten = torch.flatten(adaptive_avg_pool2d, 1);  adaptive_avg_pool2d = None
    drop = self.drop(flatten);  flatten = None
    fc = self.fc(drop);  drop = None
    log_softmax = torch.nn.functional.log_softmax(fc, dim = 1, _stacklevel = 3, dtype = None);  fc = None
    return log_softmax
    