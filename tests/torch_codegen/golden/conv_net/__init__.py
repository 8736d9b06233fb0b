from .module import *
