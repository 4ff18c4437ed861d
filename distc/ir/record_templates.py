"""Compiled shapes of the methods :func:`distc.ir.records.record` makes, for records whose
``__init__`` takes each field as it is given (no factory, no ``__post_init__``, no ``init=False``
field it sets -- but for a frozen record's memo slot after its fields, ``__post_init__`` or not):
68 of distc's 93 records.  Such a record's methods are these functions'
code with the placeholders ``_0_``, ``_1_``, ... renamed to its fields (``CodeType.replace``): the
bytecode compiling its source gives, without compiling (~0.1-0.3 ms a record: a ``distc shard``
run compiled 36, now 11).  ``tests/test_records.py`` holds every record of distc to that, and this
file to :func:`distc.ir.records.template_source`, which writes it (do not edit by hand).
"""

# fmt: off

def init_0(self):
    pass
def frozen_init_0(self):
    pass
def frozen_init_0_d(self):
    _setattr(self, '_x_', _d__x_)
def frozen_init_0_dp(self):
    _setattr(self, '_x_', _d__x_)
    self.__post_init__()
def eq_0(self, other):
    if other.__class__ is self.__class__:
        return () == ()
    return NotImplemented
def hash_0(self):
    return hash(())
def init_1(self, _0_):
    self._0_ = _0_
def frozen_init_1(self, _0_):
    _setattr(self, '_0_', _0_)
def frozen_init_1_d(self, _0_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_x_', _d__x_)
def frozen_init_1_dp(self, _0_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_x_', _d__x_)
    self.__post_init__()
def eq_1(self, other):
    if other.__class__ is self.__class__:
        return (self._0_,) == (other._0_,)
    return NotImplemented
def hash_1(self):
    return hash((self._0_,))
def init_2(self, _0_, _1_):
    self._0_ = _0_
    self._1_ = _1_
def frozen_init_2(self, _0_, _1_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
def frozen_init_2_d(self, _0_, _1_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_x_', _d__x_)
def frozen_init_2_dp(self, _0_, _1_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_x_', _d__x_)
    self.__post_init__()
def eq_2(self, other):
    if other.__class__ is self.__class__:
        return (self._0_,self._1_,) == (other._0_,other._1_,)
    return NotImplemented
def hash_2(self):
    return hash((self._0_,self._1_,))
def init_3(self, _0_, _1_, _2_):
    self._0_ = _0_
    self._1_ = _1_
    self._2_ = _2_
def frozen_init_3(self, _0_, _1_, _2_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
def frozen_init_3_d(self, _0_, _1_, _2_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_x_', _d__x_)
def frozen_init_3_dp(self, _0_, _1_, _2_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_x_', _d__x_)
    self.__post_init__()
def eq_3(self, other):
    if other.__class__ is self.__class__:
        return (self._0_,self._1_,self._2_,) == (other._0_,other._1_,other._2_,)
    return NotImplemented
def hash_3(self):
    return hash((self._0_,self._1_,self._2_,))
def init_4(self, _0_, _1_, _2_, _3_):
    self._0_ = _0_
    self._1_ = _1_
    self._2_ = _2_
    self._3_ = _3_
def frozen_init_4(self, _0_, _1_, _2_, _3_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
def frozen_init_4_d(self, _0_, _1_, _2_, _3_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_x_', _d__x_)
def frozen_init_4_dp(self, _0_, _1_, _2_, _3_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_x_', _d__x_)
    self.__post_init__()
def eq_4(self, other):
    if other.__class__ is self.__class__:
        return (self._0_,self._1_,self._2_,self._3_,) == (other._0_,other._1_,other._2_,other._3_,)
    return NotImplemented
def hash_4(self):
    return hash((self._0_,self._1_,self._2_,self._3_,))
def init_5(self, _0_, _1_, _2_, _3_, _4_):
    self._0_ = _0_
    self._1_ = _1_
    self._2_ = _2_
    self._3_ = _3_
    self._4_ = _4_
def frozen_init_5(self, _0_, _1_, _2_, _3_, _4_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_4_', _4_)
def frozen_init_5_d(self, _0_, _1_, _2_, _3_, _4_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_4_', _4_)
    _setattr(self, '_x_', _d__x_)
def frozen_init_5_dp(self, _0_, _1_, _2_, _3_, _4_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_4_', _4_)
    _setattr(self, '_x_', _d__x_)
    self.__post_init__()
def eq_5(self, other):
    if other.__class__ is self.__class__:
        return (self._0_,self._1_,self._2_,self._3_,self._4_,) == (other._0_,other._1_,other._2_,other._3_,other._4_,)
    return NotImplemented
def hash_5(self):
    return hash((self._0_,self._1_,self._2_,self._3_,self._4_,))
def init_6(self, _0_, _1_, _2_, _3_, _4_, _5_):
    self._0_ = _0_
    self._1_ = _1_
    self._2_ = _2_
    self._3_ = _3_
    self._4_ = _4_
    self._5_ = _5_
def frozen_init_6(self, _0_, _1_, _2_, _3_, _4_, _5_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_4_', _4_)
    _setattr(self, '_5_', _5_)
def frozen_init_6_d(self, _0_, _1_, _2_, _3_, _4_, _5_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_4_', _4_)
    _setattr(self, '_5_', _5_)
    _setattr(self, '_x_', _d__x_)
def frozen_init_6_dp(self, _0_, _1_, _2_, _3_, _4_, _5_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_4_', _4_)
    _setattr(self, '_5_', _5_)
    _setattr(self, '_x_', _d__x_)
    self.__post_init__()
def eq_6(self, other):
    if other.__class__ is self.__class__:
        return (self._0_,self._1_,self._2_,self._3_,self._4_,self._5_,) == (other._0_,other._1_,other._2_,other._3_,other._4_,other._5_,)
    return NotImplemented
def hash_6(self):
    return hash((self._0_,self._1_,self._2_,self._3_,self._4_,self._5_,))
def init_7(self, _0_, _1_, _2_, _3_, _4_, _5_, _6_):
    self._0_ = _0_
    self._1_ = _1_
    self._2_ = _2_
    self._3_ = _3_
    self._4_ = _4_
    self._5_ = _5_
    self._6_ = _6_
def frozen_init_7(self, _0_, _1_, _2_, _3_, _4_, _5_, _6_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_4_', _4_)
    _setattr(self, '_5_', _5_)
    _setattr(self, '_6_', _6_)
def frozen_init_7_d(self, _0_, _1_, _2_, _3_, _4_, _5_, _6_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_4_', _4_)
    _setattr(self, '_5_', _5_)
    _setattr(self, '_6_', _6_)
    _setattr(self, '_x_', _d__x_)
def frozen_init_7_dp(self, _0_, _1_, _2_, _3_, _4_, _5_, _6_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_4_', _4_)
    _setattr(self, '_5_', _5_)
    _setattr(self, '_6_', _6_)
    _setattr(self, '_x_', _d__x_)
    self.__post_init__()
def eq_7(self, other):
    if other.__class__ is self.__class__:
        return (self._0_,self._1_,self._2_,self._3_,self._4_,self._5_,self._6_,) == (other._0_,other._1_,other._2_,other._3_,other._4_,other._5_,other._6_,)
    return NotImplemented
def hash_7(self):
    return hash((self._0_,self._1_,self._2_,self._3_,self._4_,self._5_,self._6_,))
def init_8(self, _0_, _1_, _2_, _3_, _4_, _5_, _6_, _7_):
    self._0_ = _0_
    self._1_ = _1_
    self._2_ = _2_
    self._3_ = _3_
    self._4_ = _4_
    self._5_ = _5_
    self._6_ = _6_
    self._7_ = _7_
def frozen_init_8(self, _0_, _1_, _2_, _3_, _4_, _5_, _6_, _7_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_4_', _4_)
    _setattr(self, '_5_', _5_)
    _setattr(self, '_6_', _6_)
    _setattr(self, '_7_', _7_)
def frozen_init_8_d(self, _0_, _1_, _2_, _3_, _4_, _5_, _6_, _7_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_4_', _4_)
    _setattr(self, '_5_', _5_)
    _setattr(self, '_6_', _6_)
    _setattr(self, '_7_', _7_)
    _setattr(self, '_x_', _d__x_)
def frozen_init_8_dp(self, _0_, _1_, _2_, _3_, _4_, _5_, _6_, _7_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_4_', _4_)
    _setattr(self, '_5_', _5_)
    _setattr(self, '_6_', _6_)
    _setattr(self, '_7_', _7_)
    _setattr(self, '_x_', _d__x_)
    self.__post_init__()
def eq_8(self, other):
    if other.__class__ is self.__class__:
        return (self._0_,self._1_,self._2_,self._3_,self._4_,self._5_,self._6_,self._7_,) == (other._0_,other._1_,other._2_,other._3_,other._4_,other._5_,other._6_,other._7_,)
    return NotImplemented
def hash_8(self):
    return hash((self._0_,self._1_,self._2_,self._3_,self._4_,self._5_,self._6_,self._7_,))
def init_9(self, _0_, _1_, _2_, _3_, _4_, _5_, _6_, _7_, _8_):
    self._0_ = _0_
    self._1_ = _1_
    self._2_ = _2_
    self._3_ = _3_
    self._4_ = _4_
    self._5_ = _5_
    self._6_ = _6_
    self._7_ = _7_
    self._8_ = _8_
def frozen_init_9(self, _0_, _1_, _2_, _3_, _4_, _5_, _6_, _7_, _8_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_4_', _4_)
    _setattr(self, '_5_', _5_)
    _setattr(self, '_6_', _6_)
    _setattr(self, '_7_', _7_)
    _setattr(self, '_8_', _8_)
def eq_9(self, other):
    if other.__class__ is self.__class__:
        return (self._0_,self._1_,self._2_,self._3_,self._4_,self._5_,self._6_,self._7_,self._8_,) == (other._0_,other._1_,other._2_,other._3_,other._4_,other._5_,other._6_,other._7_,other._8_,)
    return NotImplemented
def hash_9(self):
    return hash((self._0_,self._1_,self._2_,self._3_,self._4_,self._5_,self._6_,self._7_,self._8_,))
def init_10(self, _0_, _1_, _2_, _3_, _4_, _5_, _6_, _7_, _8_, _9_):
    self._0_ = _0_
    self._1_ = _1_
    self._2_ = _2_
    self._3_ = _3_
    self._4_ = _4_
    self._5_ = _5_
    self._6_ = _6_
    self._7_ = _7_
    self._8_ = _8_
    self._9_ = _9_
def frozen_init_10(self, _0_, _1_, _2_, _3_, _4_, _5_, _6_, _7_, _8_, _9_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_4_', _4_)
    _setattr(self, '_5_', _5_)
    _setattr(self, '_6_', _6_)
    _setattr(self, '_7_', _7_)
    _setattr(self, '_8_', _8_)
    _setattr(self, '_9_', _9_)
def eq_10(self, other):
    if other.__class__ is self.__class__:
        return (self._0_,self._1_,self._2_,self._3_,self._4_,self._5_,self._6_,self._7_,self._8_,self._9_,) == (other._0_,other._1_,other._2_,other._3_,other._4_,other._5_,other._6_,other._7_,other._8_,other._9_,)
    return NotImplemented
def hash_10(self):
    return hash((self._0_,self._1_,self._2_,self._3_,self._4_,self._5_,self._6_,self._7_,self._8_,self._9_,))
def init_11(self, _0_, _1_, _2_, _3_, _4_, _5_, _6_, _7_, _8_, _9_, _10_):
    self._0_ = _0_
    self._1_ = _1_
    self._2_ = _2_
    self._3_ = _3_
    self._4_ = _4_
    self._5_ = _5_
    self._6_ = _6_
    self._7_ = _7_
    self._8_ = _8_
    self._9_ = _9_
    self._10_ = _10_
def frozen_init_11(self, _0_, _1_, _2_, _3_, _4_, _5_, _6_, _7_, _8_, _9_, _10_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_4_', _4_)
    _setattr(self, '_5_', _5_)
    _setattr(self, '_6_', _6_)
    _setattr(self, '_7_', _7_)
    _setattr(self, '_8_', _8_)
    _setattr(self, '_9_', _9_)
    _setattr(self, '_10_', _10_)
def eq_11(self, other):
    if other.__class__ is self.__class__:
        return (self._0_,self._1_,self._2_,self._3_,self._4_,self._5_,self._6_,self._7_,self._8_,self._9_,self._10_,) == (other._0_,other._1_,other._2_,other._3_,other._4_,other._5_,other._6_,other._7_,other._8_,other._9_,other._10_,)
    return NotImplemented
def hash_11(self):
    return hash((self._0_,self._1_,self._2_,self._3_,self._4_,self._5_,self._6_,self._7_,self._8_,self._9_,self._10_,))
def init_12(self, _0_, _1_, _2_, _3_, _4_, _5_, _6_, _7_, _8_, _9_, _10_, _11_):
    self._0_ = _0_
    self._1_ = _1_
    self._2_ = _2_
    self._3_ = _3_
    self._4_ = _4_
    self._5_ = _5_
    self._6_ = _6_
    self._7_ = _7_
    self._8_ = _8_
    self._9_ = _9_
    self._10_ = _10_
    self._11_ = _11_
def frozen_init_12(self, _0_, _1_, _2_, _3_, _4_, _5_, _6_, _7_, _8_, _9_, _10_, _11_):
    _setattr(self, '_0_', _0_)
    _setattr(self, '_1_', _1_)
    _setattr(self, '_2_', _2_)
    _setattr(self, '_3_', _3_)
    _setattr(self, '_4_', _4_)
    _setattr(self, '_5_', _5_)
    _setattr(self, '_6_', _6_)
    _setattr(self, '_7_', _7_)
    _setattr(self, '_8_', _8_)
    _setattr(self, '_9_', _9_)
    _setattr(self, '_10_', _10_)
    _setattr(self, '_11_', _11_)
def eq_12(self, other):
    if other.__class__ is self.__class__:
        return (self._0_,self._1_,self._2_,self._3_,self._4_,self._5_,self._6_,self._7_,self._8_,self._9_,self._10_,self._11_,) == (other._0_,other._1_,other._2_,other._3_,other._4_,other._5_,other._6_,other._7_,other._8_,other._9_,other._10_,other._11_,)
    return NotImplemented
def hash_12(self):
    return hash((self._0_,self._1_,self._2_,self._3_,self._4_,self._5_,self._6_,self._7_,self._8_,self._9_,self._10_,self._11_,))
